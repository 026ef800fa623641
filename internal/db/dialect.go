package db

import "fmt"

// dialect names what a query needs of its engine where SQLite and
// PostgreSQL spell it differently; a query says which it needs, and
// everything else of it is written once, in the SQL both speak (upserts
// with ON CONFLICT … excluded, RETURNING, CASE). The one thing left to the
// PostgreSQL connection is the placeholders: ? and ?N become $N
// (postgresSQL). Values of two forms are dyn's.
type dialect struct{ pg bool }

// forUpdate ends a query that reads the row a write transaction goes on to
// change: PostgreSQL locks it (FOR UPDATE), so that another replica's write
// of the same session waits for this one; SQLite's writes are one at a
// time anyway, and has no such clause.
func (d dialect) forUpdate() string {
	if d.pg {
		return " FOR UPDATE"
	}
	return ""
}

// indexedBy follows a table's name where SQLite must be told the index to
// walk (its planner would sort otherwise); PostgreSQL's planner chooses
// well and has no hints.
func (d dialect) indexedBy(index string) string {
	if d.pg {
		return ""
	}
	return " INDEXED BY " + index
}

// bytePrefix is the start of a text column, its first ? bytes: in SQLite
// the text as a blob, in PostgreSQL a BYTEA already.
func (d dialect) bytePrefix(col string) string {
	if d.pg {
		return "substring(" + col + " from 1 for ?)"
	}
	return "substr(CAST(" + col + " AS BLOB), 1, ?)"
}

// jsonText and jsonInt are element i of a column's JSON array, as text and
// as an integer.
func (d dialect) jsonText(col string, i int) string {
	if d.pg {
		return fmt.Sprintf("(%s::json->>%d)", col, i)
	}
	return fmt.Sprintf("json_extract(%s, '$[%d]')", col, i)
}

func (d dialect) jsonInt(col string, i int) string {
	if d.pg {
		return fmt.Sprintf("(%s::json->>%d)::bigint", col, i)
	}
	return fmt.Sprintf("json_extract(%s, '$[%d]')", col, i)
}
