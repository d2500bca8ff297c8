module github.com/dhtcrawler/dhtcrawler/go

go 1.19
