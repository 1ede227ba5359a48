// Package llmtest holds in-memory fakes of the model for the use cases' tests: Chat streams
// scripted Steps (a wait, then a chunk, an error or a panic) as llm.Client's Stream does, honouring
// the context as the client does. Tests that need the wire itself (SSE over HTTP) use
// internal/fakellm instead.
package llmtest
