// A minimal Go echo server for Scripts/echo-vs-go.sh: a goroutine per connection.
// Not part of the Swift package; built only by that script when `go` is installed.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	for {
		conn, err := ln.Accept()
		if err != nil {
			continue
		}
		go func(c net.Conn) {
			defer c.Close()
			buf := make([]byte, 16*1024)
			io.CopyBuffer(c, c, buf)
		}(conn)
	}
}
