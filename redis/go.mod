module github.com/bulwark-go/bulwark/redis

go 1.26.0

require (
	github.com/bulwark-go/bulwark v0.1.0
	github.com/bulwark-go/bulwark/durable v0.1.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/panjf2000/ants/v2 v2.12.1 // indirect
	github.com/rcrowley/go-metrics v0.0.0-20250401214520-65e299d6c5c9 // indirect
	go.etcd.io/bbolt v1.5.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sync v0.20.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

replace github.com/bulwark-go/bulwark => ../

replace github.com/bulwark-go/bulwark/durable => ../durable
