package doctor

import (
	"context"
	"fmt"
	"time"
)

// Scheduled is one scheduled prompt as doctor lists it.
type Scheduled struct {
	ID, Channel, Creator, When string
	Next                       time.Time
}

// checkSchedules lists the scheduled prompts and the next run of each (Input.Schedules); nothing
// without a shared state to read them from.
func checkSchedules(ctx context.Context, in Input) []result {
	const name = "Scheduled prompts"
	if in.Schedules == nil {
		return nil
	}
	list, err := in.Schedules(ctx)
	if err != nil {
		r := fail(name, "could not be read: "+errText(err), "check REDIS_URL or STATE_DIR")
		r.status = statusWarn
		return []result{r}
	}
	r := ok(name, "%s", plural(len(list), "schedule", "schedules"))
	for _, s := range list {
		r.notes = append(r.notes, fmt.Sprintf("%s in %s by %s: %s; next %s", s.ID, s.Channel, s.Creator, s.When,
			s.Next.UTC().Format("2006-01-02 15:04 UTC")))
	}
	return []result{r}
}
