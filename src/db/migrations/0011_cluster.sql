CREATE TABLE `hosts` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`url` text NOT NULL,
	`agent_url` text NOT NULL,
	`fingerprint` text NOT NULL,
	`version` text NOT NULL,
	`started_at` text NOT NULL,
	`last_seen_at` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `rate_windows` (
	`key_id` text NOT NULL,
	`minute` integer NOT NULL,
	`requests` integer DEFAULT 0 NOT NULL,
	`tokens` integer DEFAULT 0 NOT NULL,
	PRIMARY KEY(`key_id`, `minute`)
);
--> statement-breakpoint
ALTER TABLE `jobs` ADD `claimed_by` text;--> statement-breakpoint
ALTER TABLE `workers` ADD `host_id` text;