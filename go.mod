module github.com/delegationstudio/studio

go 1.26.8
