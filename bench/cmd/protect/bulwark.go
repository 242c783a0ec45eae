package main

func bulwarkProtections() []func() protection { return nil }
