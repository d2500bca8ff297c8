// dhtc-go-crawl crawls the DHT and prints one torrent JSON line per verified torrent on
// stdout, until interrupted (Ctrl-C), -duration elapses, or -max torrents were printed.
//
//	PKG_CONFIG_PATH=<build>/pkgconfig go run . -duration 60s
//	go run . -options '{"allow_private_addresses":true,"crawl":{"bootstrap":{"sources":["127.0.0.1:6881"]}}}'
//
// Without -options it uses the library's defaults: the public bootstrap routers.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dhtcrawler/dhtcrawler/go/dhtcrawler"
)

func main() {
	options := flag.String("options", "", "options JSON document (docs/options.md); empty: defaults")
	duration := flag.Duration("duration", 0, "stop after this long (0: until interrupted)")
	max := flag.Int("max", 0, "stop after this many torrents (0: no limit)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}

	c, err := dhtcrawler.New(*options,
		dhtcrawler.WithErrors(func(m string) { fmt.Fprintln(os.Stderr, "error:", m) }))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer c.Close()

	printed := make(chan struct{})
	go func() {
		defer close(printed)
		n := 0
		for t := range c.Torrents() {
			fmt.Println(string(t.JSON))
			if n++; *max > 0 && n == *max {
				_ = c.Shutdown()
			}
		}
	}()
	if err := c.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if s, err := c.Stats(); err == nil {
		fmt.Fprintf(os.Stderr, "stopped: %d nodes pooled, %d responsive, at %s\n",
			s.NodePoolSize, s.ResponsiveNodes, time.Now().UTC().Format(time.RFC3339))
	}
	_ = c.Close() // closes Torrents after the last callback
	<-printed
}
