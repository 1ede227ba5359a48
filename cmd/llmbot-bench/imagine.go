package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"time"

	"github.com/llmbot/llmbot/internal/fakellm"
	"github.com/llmbot/llmbot/internal/fakeslack"
	"github.com/llmbot/llmbot/internal/watch"
)

// imagineResult is what one -imagine run measured.
type imagineResult struct {
	jobs, mib        int
	idleRSS, peakRSS int64 // KB
	files            int   // pictures uploaded and shared
	took             time.Duration
}

// runImagine starts the bot, asks for n pictures with /imagine from n people at once and has the
// fake model answer them all at the same instant with mib MiB pictures (b64_json), the bot's worst
// case for memory: it measures the bot's peak RSS until every picture is uploaded.
func runImagine(ctx context.Context, set settings, n, mib int) (*imagineResult, error) {
	slack := fakeslack.New(fakeslack.Config{})
	defer slack.Close()
	model := fakellm.New()
	defer model.Close()
	picture := make([]byte, mib<<20)
	if _, err := rand.Read(picture); err != nil { // incompressible, like a real PNG's data
		return nil, err
	}
	copy(picture, fakellm.PNG(2, 2)[:8]) // a PNG signature, so the bot takes it for one
	var answerAt time.Time               // set before the first command; read by the model's handler
	model.SetImage(func(fakellm.ImageRequest) fakellm.ImageReply {
		return fakellm.ImageReply{Image: picture, Delay: time.Until(answerAt)}
	})
	env := append(fakesEnv(slack, model), "MAX_CONCURRENT_REPLIES="+strconv.Itoa(n+10), "HOME="+set.workDir)
	env = append(env, set.botEnv...) // later entries win (os/exec keeps the last of a key)
	logPath := filepath.Join(set.workDir, fmt.Sprintf("bot-imagine-%d.log", n))
	bot, err := startConnected(ctx, set.botPath, env, logPath, slack)
	if err != nil {
		return nil, err
	}
	defer bot.stop(10 * time.Second)
	if err := watch.Sleep(ctx, set.settle); err != nil {
		return nil, err
	}
	res := &imagineResult{jobs: n, mib: mib}
	if res.idleRSS, err = memKB(bot.pid(), "VmRSS"); err != nil {
		return nil, err
	}
	start := time.Now()
	answerAt = start.Add(2 * time.Second) // every job is waiting by then
	for i := range n {
		slack.SlashCommand("C0001", fmt.Sprintf("U%04d", i), "/imagine", fmt.Sprintf("a fox, take %d", i))
	}
	shared := func() int {
		k := 0
		for _, f := range slack.Files() {
			if f.Shared {
				k++
			}
		}
		return k
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	waitErr := slack.WaitFor(wctx, func() bool { return shared() >= n || !bot.running() })
	cancel()
	res.took, res.files = time.Since(start), shared()
	if !bot.running() {
		return res, fmt.Errorf("the bot exited during the run (log: %s)", logPath)
	}
	if res.peakRSS, err = memKB(bot.pid(), "VmHWM"); err != nil {
		return nil, err
	}
	if waitErr != nil {
		return res, fmt.Errorf("%d of %d pictures shared in %v: %w", res.files, n, res.took.Round(time.Second), waitErr)
	}
	return res, nil
}

// writeImagine prints an -imagine run's figures.
func writeImagine(w io.Writer, r *imagineResult) {
	fmt.Fprintf(w, "| /imagine jobs | picture | answered at once | RSS idle / peak MB | pictures shared | until the last |\n")
	fmt.Fprintf(w, "|---:|---:|---|---|---:|---:|\n")
	fmt.Fprintf(w, "| %d | %d MiB | yes (b64_json) | %.1f / %.1f | %d / %d | %v |\n",
		r.jobs, r.mib, float64(r.idleRSS)/1024, float64(r.peakRSS)/1024, r.files, r.jobs, r.took.Round(100*time.Millisecond))
}
