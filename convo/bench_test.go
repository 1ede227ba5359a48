package convo

import "testing"

func BenchmarkBuild10000Messages(b *testing.B) {
	thread := hugeThread(10000)
	trigger := thread[len(thread)-1]
	opt := testOptions()
	b.ReportAllocs()
	for b.Loop() {
		Build(thread, trigger, testNames, opt)
	}
}

// BenchmarkBuild10000MessagesAllFit converts every message (a budget larger than the thread).
func BenchmarkBuild10000MessagesAllFit(b *testing.B) {
	thread := hugeThread(10000)
	trigger := thread[len(thread)-1]
	opt := testOptions()
	opt.Budget = 10_000_000
	b.ReportAllocs()
	for b.Loop() {
		Build(thread, trigger, testNames, opt)
	}
}
