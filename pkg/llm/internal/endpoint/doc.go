// Package endpoint holds what the SDK-backed providers (packages
// llm/openai and llm/anthropic) share: the endpoint [Options] each one's
// options struct embeds, the option constructors that set them ([BaseURL],
// [APIKey], [Name], [HTTPClient], [MaxRetries], [CompletionArgs],
// [FromConfig]), [Apply], which applies a provider's options in order, and
// [RequestOptions], which turns them into an SDK's request options, with
// the HTTP client of every provider not given one: it keeps many idle
// connections per host and, through gatedTransport, lets a burst of calls
// to an HTTP/2 host open a few connections instead of one per call.
//
// Looking for the error every provider returns? See llm.ProviderError.
package endpoint
