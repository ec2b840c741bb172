// A Go client of `dpsql serve` through pgx v4 (Debian's golang-github-jackc-pgx-v4-dev), run by
// tests/test_server_go.py: typed parameters through the extended protocol, the catalog, and a
// refusal that comes back as an error without hanging. One JSON object per line on stdout.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
)

type line struct {
	Name     string      `json:"name"`
	Value    interface{} `json:"value,omitempty"`
	SQLState string      `json:"sqlstate,omitempty"`
	Error    string      `json:"error,omitempty"`
}

func emit(l line) {
	out, _ := json.Marshal(l)
	fmt.Println(string(out))
}

func one(ctx context.Context, conn *pgx.Conn, name, sql string, args ...interface{}) {
	var value interface{}
	err := conn.QueryRow(ctx, sql, args...).Scan(&value)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) {
			emit(line{Name: name, SQLState: pgErr.Code, Error: pgErr.Message})
			return
		}
		emit(line{Name: name, Error: err.Error()})
		return
	}
	if t, ok := value.(time.Time); ok {
		value = t.UTC().Format(time.RFC3339)
	}
	emit(line{Name: name, Value: value})
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, os.Args[1])
	if err != nil {
		emit(line{Name: "connect", Error: err.Error()})
		os.Exit(1)
	}
	defer conn.Close(ctx)
	emit(line{Name: "connect", Value: "ok"})
	one(ctx, conn, "int", "SELECT COUNT(*) FROM people WHERE age > $1", int64(30))
	one(ctx, conn, "int32", "SELECT COUNT(*) FROM people WHERE children = $1", int32(2))
	one(ctx, conn, "float", "SELECT COUNT(*) FROM people WHERE income > $1", 50000.5)
	one(ctx, conn, "bool", "SELECT COUNT(*) FROM people WHERE married = $1", true)
	one(ctx, conn, "date", "SELECT COUNT(*) FROM people WHERE signup_date >= $1",
		time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	one(ctx, conn, "timestamp", "SELECT COUNT(*) FROM visits WHERE day < $1",
		time.Date(2025, 6, 1, 12, 30, 0, 0, time.FixedZone("", 2*3600)))
	one(ctx, conn, "refused", "SELECT email FROM people WHERE age > $1", int64(30))
	one(ctx, conn, "after_refusal", "SELECT COUNT(*) FROM people WHERE sex = $1", "F")
	one(ctx, conn, "tables", "SELECT COUNT(*) FROM information_schema.tables "+
		"WHERE table_schema = $1", "public")
	one(ctx, conn, "catalog_timestamp", "SELECT $1::timestamptz",
		time.Date(2025, 6, 1, 12, 30, 0, 0, time.UTC))
}
