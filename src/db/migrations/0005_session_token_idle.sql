ALTER TABLE `sessions` ADD `token_hash` text;--> statement-breakpoint
ALTER TABLE `sessions` ADD `last_seen_at` text;