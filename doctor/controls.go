package doctor

import "strings"

// Controls are the team controls as the settings turn them on: the doctor says which are on (they
// make no request of their own to check).
type Controls struct {
	Shared    bool     // REDIS_URL is set: the counts and budgets are shared by the replicas
	Retention int      // USAGE_RETENTION_DAYS
	Budgets   []string // the budgets set, as "person daily 100000"
	Redaction []string // REDACT's kinds and REDACT_PATTERNS' names
	Admins    int      // USAGE_ADMINS
	Prices    int      // models in PRICES
}

// checkControls is the line that says which of usage counting, budgets and redaction are on.
func checkControls(in Input) result {
	const name = "Usage, budgets, redaction"
	c := in.Controls
	where := "in this process (and STATE_DIR)"
	if c.Shared {
		where = "in Redis, shared by the replicas"
	}
	r := ok(name, "usage counted per person, channel and model %s, kept %d days", where, c.Retention)
	r.notes = append(r.notes, onOff("budgets", c.Budgets), onOff("redaction before the model", c.Redaction))
	admins := "no admins (USAGE_ADMINS): /usage shows each person their own use only"
	if c.Admins > 0 {
		admins = "/usage admins: " + plural(c.Admins, "person", "people") + ", prices for " + plural(c.Prices, "model", "models")
	}
	r.notes = append(r.notes, admins)
	return r
}

func onOff(what string, on []string) string {
	if len(on) == 0 {
		return what + ": off"
	}
	return what + ": " + strings.Join(on, ", ")
}
