package fakellm_test

import (
	"bufio"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/llmbot/llmbot/internal/fakellm"
)

// A test decides each answer; the client sees real OpenAI SSE chunks.
func Example() {
	srv := fakellm.New()
	defer srv.Close()
	srv.SetChat(func(req fakellm.ChatRequest) fakellm.Reply {
		if req.Temperature != nil {
			return fakellm.UnsupportedTemperature(fmt.Sprint(*req.Temperature))
		}
		return fakellm.Text("Hello, world!").Paced(10*time.Millisecond, time.Millisecond)
	})

	req, _ := http.NewRequest(http.MethodPost, srv.URL()+"/chat/completions",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+fakellm.DefaultAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	events := 0
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "data: ") {
			events++
		}
	}
	r := srv.Requests()[0]
	fmt.Println(resp.Header.Get("Content-Type"))
	fmt.Println(events, "events;", len(r.Tokens), "tokens:", fakellm.Split("Hello, world!"))
	fmt.Println(r.Finished, r.ClientGone)
	// Output:
	// text/event-stream; charset=utf-8
	// 7 events; 4 tokens: [Hello ,  world !]
	// true false
}
