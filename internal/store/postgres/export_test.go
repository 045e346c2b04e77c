package postgres

// Migrations lets tests build a database at an older schema version.
var Migrations = migrations
