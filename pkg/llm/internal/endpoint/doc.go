// Package endpoint holds what the SDK-backed providers (packages
// llm/openai and llm/anthropic) share: the endpoint [Options] each one's
// options struct embeds, the option constructors that set them ([BaseURL],
// [APIKey], [Name], [HTTPClient], [MaxRetries], [CompletionArgs],
// [FromConfig]), [Apply], which applies a provider's options in order, and
// [RequestOptions], which turns them into an SDK's request options.
//
// Looking for the error every provider returns? See llm.ProviderError.
package endpoint
