package main

func writePlot(path string, results []*result, set settings) error { return nil }
