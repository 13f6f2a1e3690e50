CREATE TABLE "rate_windows" (
	"key_id" text NOT NULL,
	"second" bigint NOT NULL,
	"requests" bigint DEFAULT 0 NOT NULL,
	"tokens" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "rate_windows_key_id_second_pk" PRIMARY KEY("key_id","second")
);
