module github.com/delegationstudio/studio

go 1.26.8

require (
	github.com/dlclark/regexp2 v1.11.0
	github.com/pkoukk/tiktoken-go v0.1.8
	github.com/pkoukk/tiktoken-go-loader v0.0.2
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	golang.org/x/text v0.14.0
)

require github.com/google/uuid v1.3.0 // indirect
