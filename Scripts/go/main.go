// Go counterparts of coroutines-bench's channel and spawn workloads, same shapes, for
// comparison only (Go is not a dependency of the package). Run with Scripts/compare-go.sh.
package main

import (
	"fmt"
	"os"
	"sort"
	"sync"
	"time"
)

func median(runs int, f func() float64) (float64, float64, float64) {
	f() // warm-up
	v := make([]float64, runs)
	for i := range v {
		v[i] = f()
	}
	sort.Float64s(v)
	return v[len(v)/2], v[0], v[len(v)-1]
}

func pingpong(n int) float64 {
	ping, pong := make(chan int), make(chan int)
	go func() {
		for i := 0; i < n; i++ {
			pong <- <-ping
		}
	}()
	t0 := time.Now()
	sum := 0
	for i := 0; i < n; i++ {
		ping <- i
		sum += <-pong
	}
	return float64(time.Since(t0).Nanoseconds()) / float64(n)
}

func buffered(n int) float64 {
	ch := make(chan int, 64)
	t0 := time.Now()
	go func() {
		for i := 0; i < n; i++ {
			ch <- i
		}
	}()
	sum := 0
	for i := 0; i < n; i++ {
		sum += <-ch
	}
	return float64(time.Since(t0).Nanoseconds()) / float64(n)
}

// Producers do plain sends and are left blocked at the end (as in the Go sieve example).
func selectBench(n int) float64 {
	a, b := make(chan int), make(chan int)
	go func() {
		for {
			a <- 1
		}
	}()
	go func() {
		for {
			b <- 2
		}
	}()
	t0 := time.Now()
	fromA := 0
	for i := 0; i < n; i++ {
		select {
		case <-a:
			fromA++
		case <-b:
		}
	}
	return float64(time.Since(t0).Nanoseconds()) / float64(n)
}

// The classic Go concurrent prime sieve (golang.org/doc/play/sieve.go), timed to the
// count-th prime.
func sieve(count int) float64 {
	t0 := time.Now()
	src := make(chan int)
	go func(ch chan<- int) {
		for n := 2; ; n++ {
			ch <- n
		}
	}(src)
	last := 0
	for i := 0; i < count; i++ {
		prime := <-src
		last = prime
		in, out := src, make(chan int)
		go func() {
			for {
				if n := <-in; n%prime != 0 {
					out <- n
				}
			}
		}()
		src = out
	}
	if count == 2000 && last != 17389 {
		panic(fmt.Sprintf("sieve: the 2,000th prime is 17389, got %d", last))
	}
	return float64(time.Since(t0).Nanoseconds()) / 1e6
}

func spawn(n int) float64 {
	var wg sync.WaitGroup
	var mu sync.Mutex
	counter := 0
	t0 := time.Now()
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			mu.Lock()
			counter++
			mu.Unlock()
			wg.Done()
		}()
	}
	wg.Wait()
	return float64(time.Since(t0).Nanoseconds()) / float64(n)
}

func skynetNode(c chan int, num, size, div int) {
	if size == 1 {
		c <- num
		return
	}
	rc := make(chan int, div)
	for i := 0; i < div; i++ {
		sub := size / div
		go skynetNode(rc, num+i*sub, sub, div)
	}
	sum := 0
	for i := 0; i < div; i++ {
		sum += <-rc
	}
	c <- sum
}

func skynet() float64 {
	t0 := time.Now()
	c := make(chan int, 1)
	go skynetNode(c, 0, 1000000, 10)
	if s := <-c; s != 499999500000 {
		panic("skynet sum")
	}
	return float64(time.Since(t0).Nanoseconds()) / 1e6
}

func main() {
	all := map[string]func() (float64, float64, float64){
		"pingpong": func() (float64, float64, float64) { return median(9, func() float64 { return pingpong(500000) }) },
		"buffered": func() (float64, float64, float64) { return median(9, func() float64 { return buffered(2000000) }) },
		"select":   func() (float64, float64, float64) { return median(9, func() float64 { return selectBench(500000) }) },
		"sieve":    func() (float64, float64, float64) { return median(5, func() float64 { return sieve(2000) }) },
		"spawn":    func() (float64, float64, float64) { return median(9, func() float64 { return spawn(100000) }) },
		"skynet":   func() (float64, float64, float64) { return median(5, skynet) },
	}
	units := map[string]string{"pingpong": "ns/round trip", "buffered": "ns/message", "select": "ns/op",
		"sieve": "ms", "spawn": "ns/goroutine", "skynet": "ms"}
	names := os.Args[1:]
	if len(names) == 0 {
		names = []string{"pingpong", "buffered", "select", "sieve", "spawn", "skynet"}
	}
	for _, name := range names {
		f, ok := all[name]
		if !ok {
			fmt.Println("unknown:", name)
			continue
		}
		m, lo, hi := f()
		fmt.Printf("go: %-24s median=%.1f %s  (%.1f…%.1f)\n", name, m, units[name], lo, hi)
	}
}
