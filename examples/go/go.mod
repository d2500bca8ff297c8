module github.com/dhtcrawler/dhtcrawler/examples/go/dhtc-go-crawl

go 1.21

require github.com/dhtcrawler/dhtcrawler/go v0.0.0

replace github.com/dhtcrawler/dhtcrawler/go => ../../go
