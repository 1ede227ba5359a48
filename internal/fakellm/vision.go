package fakellm

import (
	"encoding/json"
	"net/http"
)

// Images returns the image_url URLs of the request's messages, in order.
func (r ChatRequest) Images() []string {
	var urls []string
	for _, m := range r.Messages {
		var parts []struct {
			Type     string `json:"type"`
			ImageURL struct {
				URL string `json:"url"`
			} `json:"image_url"`
		}
		if json.Unmarshal(m.RawContent, &parts) != nil {
			continue // string content
		}
		for _, p := range parts {
			if p.Type == "image_url" {
				urls = append(urls, p.ImageURL.URL)
			}
		}
	}
	return urls
}

// TextServer names a model server whose refusal of image parts for a text-only model
// RefuseImages imitates.
type TextServer string

// The servers whose refusals are known.
const (
	OpenAI     TextServer = "openai"
	Azure      TextServer = "azure"
	LiteLLM    TextServer = "litellm"
	VLLM       TextServer = "vllm"
	Ollama     TextServer = "ollama"
	LlamaCpp   TextServer = "llama.cpp"
	OpenRouter TextServer = "openrouter"
)

// TextServers lists them all.
var TextServers = []TextServer{OpenAI, Azure, LiteLLM, VLLM, Ollama, LlamaCpp, OpenRouter}

// RefuseImages is server's answer to image parts sent to a model without vision: its status and
// body, as each was seen to answer.
func RefuseImages(server TextServer) Reply {
	body := map[TextServer]string{
		OpenAI:     `{"error":{"message":"Invalid content type. image_url is only supported by certain models.","type":"invalid_request_error","param":"messages.[1].content.[1].type","code":null}}`,
		Azure:      `{"error":{"message":"Invalid content type. image_url is only supported by certain models.","type":"invalid_request_error","param":"messages.[1].content.[1].type","code":null,"innererror":null}}`,
		LiteLLM:    `{"error":{"message":"litellm.BadRequestError: OpenAIException - Invalid content type. image_url is only supported by certain models.","type":"invalid_request_error","param":"None","code":"400"}}`,
		VLLM:       `{"error":{"message":"facebook/opt-125m is not a multimodal model None","type":"BadRequestError","param":null,"code":400}}`,
		Ollama:     `{"error":{"message":"this model does not support image input","type":"invalid_request_error","param":null,"code":null}}`,
		LlamaCpp:   `{"error":{"code":500,"message":"image input is not supported - hint: if this is unexpected, you may need to provide the mmproj","type":"server_error"}}`,
		OpenRouter: `{"error":{"message":"No endpoints found that support image input","code":404}}`,
	}[server]
	status := map[TextServer]int{LlamaCpp: http.StatusInternalServerError, OpenRouter: http.StatusNotFound}[server]
	if status == 0 {
		status = http.StatusBadRequest
	}
	h := http.Header{"Content-Type": {"application/json"}}
	return Reply{Status: status, Header: h, Body: body}
}

// TextOnly is a chat decider for a model without vision behind server: a request with an image
// part gets the server's refusal (RefuseImages); any other is answered by next.
func TextOnly(server TextServer, next func(ChatRequest) Reply) func(ChatRequest) Reply {
	return func(req ChatRequest) Reply {
		if len(req.Images()) > 0 {
			return RefuseImages(server)
		}
		return next(req)
	}
}
