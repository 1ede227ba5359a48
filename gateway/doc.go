// Package gateway is Slack's Web API as the use cases see it: the messages and writes they make
// (Msg, StreamStart, Upload, Private, Button, Task), the small interfaces the adapter (bot.SlackAPI
// over slack-go) implements for them (Thread, Messenger, Streamer, Uploader, Responder,
// PrivateResponder, Users), the budget of each method as the bot paces it (Budgets, shared by every
// use case and, through pace.Shared, by the replicas), and the paced Writer: the one place that
// waits for a write's turn in those budgets, records a 429 there for every caller, and retries under
// a policy (InterimRetry, ClosingRetry, ReplaceRetry). Notices are the rest of the bot's private
// notes through the same Writer, so chat.postEphemeral has one budget and one 429 loop. Fence,
// FencedMessenger and FencedStreamer hold back an answer's writes while other replicas could
// adopt it.
//
// Slack errors cross the interfaces as slack-go's own types (*slack.RateLimitedError,
// slack.SlackErrorResponse, slack.StatusCodeError) wrapped with %w: RateLimited, Transient and
// SlackErr read them. The gateway knows no use case: what to write, and when, is theirs.
//
// gatewaytest holds an in-memory Slack behind these interfaces for the use cases' tests.
package gateway
