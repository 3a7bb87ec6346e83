// Command natsgo connects a crowd of real nats.go clients the way
// `throng storm --jitter J --hold H` does — each after a uniformly random
// wait in [0, J), with nats.go's default options (-timeout sets
// nats.Timeout) — and prints how many
// connected and why the others failed, for comparison with
// `throng storm --client nats.go`. nats-go.sh builds it at run time from the
// Go module proxy; nothing of nats.go is kept in this repository.
package main

import (
	"flag"
	"fmt"
	"math/rand"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// "read tcp 127.0.0.1:4711->127.0.0.1:14222: " in network errors.
var socket = regexp.MustCompile(`^[a-z]+ tcp [0-9.:\[\]]+->[0-9.:\[\]]+: `)

func main() {
	url := flag.String("url", "nats://throng:secret@127.0.0.1:14222", "server URL")
	n := flag.Int("n", 100, "clients")
	jitter := flag.Duration("jitter", 2*time.Second, "each client starts after a random wait in [0, jitter)")
	hold := flag.Duration("hold", time.Second, "how long each connected client stays connected")
	seed := flag.Int64("seed", 1, "seed of the random waits")
	timeout := flag.Duration("timeout", nats.GetDefaultOptions().Timeout,
		"nats.Timeout: the dial, then the whole handshake (INFO, CONNECT → PONG), each within it")
	flag.Parse()

	rng := rand.New(rand.NewSource(*seed))
	waits := make([]time.Duration, *n)
	for i := range waits {
		if *jitter > 0 {
			waits[i] = time.Duration(rng.Int63n(int64(*jitter)))
		}
	}

	var mu sync.Mutex
	failures := map[string]int{}
	connected := 0
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < *n; i++ {
		wg.Add(1)
		go func(wait time.Duration) {
			defer wg.Done()
			time.Sleep(wait)
			nc, err := nats.Connect(*url, nats.Name("natsgo-crowd"), nats.Timeout(*timeout))
			mu.Lock()
			if err != nil {
				msg := err.Error()
				// Keep the kind of failure, not its details: an INFO
				// line's JSON, the socket's addresses.
				if i := strings.Index(msg, "{"); i >= 0 {
					msg = msg[:i] + "…"
				}
				msg = socket.ReplaceAllString(msg, "")
				failures[msg]++
			} else {
				connected++
			}
			mu.Unlock()
			if err == nil {
				time.Sleep(*hold)
				nc.Close()
			}
		}(waits[i])
	}
	wg.Wait()

	fmt.Printf("nats.go %s: %d clients, jitter %s, timeout %s, %.1fs\n", nats.Version, *n, *jitter, *timeout, time.Since(start).Seconds())
	fmt.Printf("connected %d\n", connected)
	fmt.Printf("failed %d\n", *n-connected)
	keys := make([]string, 0, len(failures))
	for k := range failures {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return failures[keys[a]] > failures[keys[b]] })
	for _, k := range keys {
		fmt.Printf("  %5d  %s\n", failures[k], k)
	}
	if connected == 0 {
		os.Exit(1)
	}
}
