package envelope

import (
	"errors"
	"strings"
)

// ErrEmptyBatch is returned by [FromBatch] for an empty batch.
var ErrEmptyBatch = errors.New("envelope: batch cannot be empty")

// FromBatch merges a batch of messages into one (Bub's from_batch): a copy
// of the last message whose content is every content joined by "\n" and
// whose media are every message's media in order. Every other field comes
// from the last message.
func FromBatch(batch []*Envelope) (*Envelope, error) {
	if len(batch) == 0 {
		return nil, ErrEmptyBatch
	}
	out := batch[len(batch)-1].Clone()
	contents := make([]string, len(batch))
	var media []Media
	for i, e := range batch {
		contents[i] = e.Content
		media = append(media, e.Media...)
	}
	out.Content = strings.Join(contents, "\n")
	out.Media = media
	return out, nil
}
