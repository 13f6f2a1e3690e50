CREATE TABLE `rate_windows` (
	`key_id` text NOT NULL,
	`second` integer NOT NULL,
	`requests` integer DEFAULT 0 NOT NULL,
	`tokens` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`key_id`, `second`)
);
