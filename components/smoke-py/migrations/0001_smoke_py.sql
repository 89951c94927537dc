CREATE TABLE smoke_py_note (
    name TEXT NOT NULL,
    body TEXT NOT NULL,
    CONSTRAINT smoke_py_note_pk PRIMARY KEY (name),
    CONSTRAINT smoke_py_note_body_not_empty CHECK (length(body) > 0)
);

CREATE TABLE smoke_py_tick (
    fired_at BIGINT NOT NULL,
    CONSTRAINT smoke_py_tick_pk PRIMARY KEY (fired_at)
);
