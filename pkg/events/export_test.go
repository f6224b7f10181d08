package events

// WireEncode exposes the bridge's fast encoder to the tests: ok reports
// whether it applies to typ and a.
func WireEncode(source, typ string, a Attrs, data any) (body []byte, ok bool, err error) {
	w := newWireEncoder(source)
	if !w.ok(typ, a) {
		return nil, false, nil
	}
	body, err = w.encode(typ, a, data)
	return body, true, err
}
