-- cairn schema 11: the schema a hook's payload must fit (`create_hook(schema=)`), stored
-- like a human task's form: JSON Schema text, and the pydantic model's import path when
-- one was given. NULL: the hook takes any payload.
ALTER TABLE hooks ADD COLUMN payload_schema TEXT;
ALTER TABLE hooks ADD COLUMN payload_model TEXT;
