CREATE TABLE `join_tokens` (
	`id` text PRIMARY KEY NOT NULL,
	`secret_hash` text NOT NULL,
	`reusable` integer DEFAULT false NOT NULL,
	`expires_at` text NOT NULL,
	`created_at` text NOT NULL,
	`revoked_at` text,
	`uses` integer DEFAULT 0 NOT NULL,
	`last_used_at` text
);
