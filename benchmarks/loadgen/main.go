// The collector benchmark's load generator (benchmarks/collector.py builds it with `go build` and
// runs it): simulated devices POSTing prepared request bodies to the collector, each request
// authenticated (Authorization: Bearer <app key>) with an Idempotency-Key of its own that its
// retries keep. Written in Go because the Python generator (asyncio + aiohttp's client, one process)
// was the ceiling of the measurement: it did 962 requests/s against a server that answers at once.
//
// Two modes, both bounded in requests (the bodies given) and in seconds:
//
//	closed: -devices devices post back to back until the bodies or -seconds run out; a latency is
//	        counted from the request's send.
//	open:   request i is due at i / -rate seconds after the start and its latency is counted from
//	        then (not from when it was actually sent: a collector, or a generator, that falls behind
//	        is not flattered); at most -devices requests are under way at once (a connection each),
//	        the others wait for a connection, their wait counted in their latency.
//
// With -retry, an answer 503 or 429 or none (a refused or reset connection) is retried after
// -retry-pause with the same Idempotency-Key, until a 200 or -give-up seconds after the start.
// The summary is one JSON object on stdout.
package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type outcome struct {
	mu        sync.Mutex
	latencies []float64 // seconds, of the 200s
	accepted  int64
	statuses  map[string]int
	retried   int
	gaveUp    int
}

func (o *outcome) note(status string) {
	o.mu.Lock()
	o.statuses[status]++
	o.mu.Unlock()
}

func readBodies(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var out [][]byte
	var n [4]byte
	for {
		if _, err := io.ReadFull(r, n[:]); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		body := make([]byte, binary.BigEndian.Uint32(n[:]))
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, err
		}
		out = append(out, body)
	}
}

type answer struct {
	Accepted int64 `json:"accepted"`
}

type poster struct {
	client   *http.Client
	url, key string
	prefix   string
	retry    bool
	pause    time.Duration
	giveUp   time.Time
	out      *outcome
}

// post sends body i until it is accepted (or not retried) -> whether a 200 came.
func (p *poster) post(i int, body []byte, from time.Time) {
	id := p.prefix + "-" + strconv.Itoa(i)
	for {
		req, _ := http.NewRequest(http.MethodPost, p.url, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+p.key)
		req.Header.Set("Idempotency-Key", id)
		req.Header.Set("Content-Type", "application/octet-stream")
		status := "none"
		var got answer
		resp, err := p.client.Do(req)
		if err == nil {
			data, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil {
				status = strconv.Itoa(resp.StatusCode)
				if resp.StatusCode == 200 {
					if jerr := json.Unmarshal(data, &got); jerr != nil {
						status = "200-unreadable"
					}
				}
			}
		}
		p.out.note(status)
		if status == "200" {
			lat := time.Since(from).Seconds()
			p.out.mu.Lock()
			p.out.latencies = append(p.out.latencies, lat)
			p.out.accepted += got.Accepted
			p.out.mu.Unlock()
			return
		}
		if !p.retry || !(status == "none" || status == "503" || status == "429") {
			return
		}
		if time.Now().Add(p.pause).After(p.giveUp) {
			p.out.mu.Lock()
			p.out.gaveUp++
			p.out.mu.Unlock()
			return
		}
		p.out.mu.Lock()
		p.out.retried++
		p.out.mu.Unlock()
		time.Sleep(p.pause)
	}
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return -1
	}
	i := int(q * float64(len(sorted)))
	if i > len(sorted)-1 {
		i = len(sorted) - 1
	}
	return sorted[i] * 1000
}

func main() {
	url := flag.String("url", "", "the collector's POST URL")
	keyFile := flag.String("key-file", "", "a file holding the app key (not an argument: ps shows arguments)")
	bodiesPath := flag.String("bodies", "", "request bodies, each a 4-byte big-endian length and its bytes")
	mode := flag.String("mode", "closed", "closed or open")
	devices := flag.Int("devices", 2000, "simulated devices: connections, and requests under way at most")
	rate := flag.Float64("rate", 0, "open: requests a second")
	seconds := flag.Float64("seconds", 12, "closed: stop sending after this; open: the schedule's length at most")
	retry := flag.Bool("retry", false, "retry 503, 429 and no answer with the same Idempotency-Key")
	pause := flag.Duration("retry-pause", 500*time.Millisecond, "pause before a retry")
	giveUp := flag.Float64("give-up", 120, "seconds after the start when retries stop")
	timeout := flag.Duration("timeout", 30*time.Second, "one request's timeout")
	flag.Parse()
	key, err := os.ReadFile(*keyFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen: -key-file:", err)
		os.Exit(2)
	}
	bodies, err := readBodies(*bodiesPath)
	if err != nil || len(bodies) == 0 {
		fmt.Fprintln(os.Stderr, "loadgen: -bodies: none read", err)
		os.Exit(2)
	}
	if *mode == "open" && !(*rate > 0) {
		fmt.Fprintln(os.Stderr, "loadgen: -rate must be > 0 in open mode")
		os.Exit(2)
	}
	var tag [8]byte
	rand.Read(tag[:])
	transport := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConns:        *devices,
		MaxIdleConnsPerHost: *devices,
		MaxConnsPerHost:     *devices,
		DisableCompression:  true,
		IdleConnTimeout:     90 * time.Second,
	}
	out := &outcome{statuses: map[string]int{}}
	start := time.Now()
	p := &poster{client: &http.Client{Transport: transport, Timeout: *timeout}, url: *url,
		key: string(bytes.TrimSpace(key)), prefix: hex.EncodeToString(tag[:]), retry: *retry, pause: *pause,
		giveUp: start.Add(time.Duration(*giveUp * float64(time.Second))), out: out}
	var wg sync.WaitGroup
	maxLag := 0.0
	sent := 0
	if *mode == "closed" {
		var next int64 = -1
		end := start.Add(time.Duration(*seconds * float64(time.Second)))
		for d := 0; d < *devices; d++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(atomic.AddInt64(&next, 1))
					if i >= len(bodies) || time.Now().After(end) {
						return
					}
					p.post(i, bodies[i], time.Now())
				}
			}()
		}
		wg.Wait()
		sent = int(next)
		if sent > len(bodies) {
			sent = len(bodies)
		}
	} else {
		n := len(bodies)
		if limit := int(*rate * *seconds); limit < n {
			n = limit
		}
		slots := make(chan struct{}, *devices) // a device's connection: requests under way at most
		for i := 0; i < n; i++ {
			due := start.Add(time.Duration(float64(i) / *rate * float64(time.Second)))
			if wait := time.Until(due); wait > 0 {
				time.Sleep(wait)
			}
			if lag := time.Since(due).Seconds(); lag > maxLag {
				maxLag = lag // how late the generator launched a request (its latency counts it)
			}
			wg.Add(1)
			go func(i int, due time.Time) {
				defer wg.Done()
				slots <- struct{}{}
				p.post(i, bodies[i], due)
				<-slots
			}(i, due)
		}
		sent = n
		wg.Wait()
	}
	took := time.Since(start).Seconds()
	var usage syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &usage)
	cpu := time.Duration(usage.Utime.Nano() + usage.Stime.Nano()).Seconds()
	sort.Float64s(out.latencies)
	summary := map[string]any{
		"requests": len(out.latencies), "accepted_reports": out.accepted, "seconds": took, "sent": sent,
		"requests_s": float64(len(out.latencies)) / took, "reports_s": float64(out.accepted) / took,
		"p50_ms": quantile(out.latencies, 0.50), "p99_ms": quantile(out.latencies, 0.99),
		"statuses": out.statuses, "retried": out.retried, "gave_up": out.gaveUp,
		"schedule_lag_ms": maxLag * 1000, "cpu_s": cpu,
	}
	json.NewEncoder(os.Stdout).Encode(summary)
}
