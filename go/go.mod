module github.com/dhtcrawler/dhtcrawler/go

go 1.21

require github.com/santhosh-tekuri/jsonschema/v6 v6.0.3

require golang.org/x/text v0.14.0 // indirect
