-- +goose Up
-- The credential a work block names is chosen in SQL, newest first by
-- (created_at, id) (sqlstore newestCredential): an index in that order
-- finds it without sorting the endpoint's credentials for every event.
CREATE INDEX runtime_credentials_newest ON runtime_credentials (endpoint_id, created_at, id);
DROP INDEX runtime_credentials_endpoint;

-- +goose Down
CREATE INDEX runtime_credentials_endpoint ON runtime_credentials (endpoint_id, created_at);
DROP INDEX runtime_credentials_newest;
