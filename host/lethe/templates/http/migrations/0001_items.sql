-- The `__NAME__` component's table. lethe applies migrations before the component runs; write
-- SQL that runs on SQLite and on PostgreSQL alike.
CREATE TABLE __SNAKE___item (
    item_key TEXT NOT NULL,
    body TEXT NOT NULL,
    CONSTRAINT __SNAKE___item_pk PRIMARY KEY (item_key),
    CONSTRAINT __SNAKE___item_body_not_empty CHECK (length(body) > 0)
);
