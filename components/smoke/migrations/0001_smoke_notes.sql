CREATE TABLE smoke_note (
    name TEXT NOT NULL,
    body TEXT NOT NULL,
    CONSTRAINT smoke_note_pk PRIMARY KEY (name),
    CONSTRAINT smoke_note_body_not_empty CHECK (length(body) > 0)
);

CREATE TABLE smoke_tick (
    fired_at BIGINT NOT NULL,
    CONSTRAINT smoke_tick_pk PRIMARY KEY (fired_at)
);
