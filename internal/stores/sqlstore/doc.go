// Package sqlstore holds the service's two implementations of store.Store
// (the public package github.com/acds-project/acds/store, which has the
// interface, its record types and the rules): SQLite, the embedded
// default (OpenSQLite), and PostgreSQL, which several server replicas
// may share (OpenPostgres). Both pass the conformance suite of
// store/storetest. Embedders open them with service.OpenStore.
package sqlstore
