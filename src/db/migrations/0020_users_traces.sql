CREATE TABLE `oidc_logins` (
	`state_hash` text PRIMARY KEY NOT NULL,
	`nonce` text NOT NULL,
	`code_verifier` text NOT NULL,
	`return_to` text DEFAULT '/' NOT NULL,
	`expires_at` text NOT NULL
);
--> statement-breakpoint
CREATE TABLE `project_members` (
	`user_id` text NOT NULL,
	`project_id` text NOT NULL,
	`created_at` text NOT NULL,
	PRIMARY KEY(`user_id`, `project_id`),
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`project_id`) REFERENCES `projects`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `project_members_project` ON `project_members` (`project_id`);--> statement-breakpoint
CREATE TABLE `request_bodies` (
	`request_id` text PRIMARY KEY NOT NULL,
	`workload_id` text NOT NULL,
	`at` text NOT NULL,
	`request_type` text,
	`request` blob,
	`response_type` text,
	`response` blob,
	`truncated` integer DEFAULT false NOT NULL
);
--> statement-breakpoint
CREATE TABLE `request_log` (
	`id` text PRIMARY KEY NOT NULL,
	`at` text NOT NULL,
	`workload_id` text NOT NULL,
	`project_id` text NOT NULL,
	`key_id` text,
	`kind` text NOT NULL,
	`route` text NOT NULL,
	`model` text,
	`status` integer NOT NULL,
	`error_code` text,
	`tokens_in` integer,
	`tokens_out` integer,
	`queue_ms` integer,
	`ttft_ms` integer,
	`total_ms` integer NOT NULL,
	`assignment_id` text,
	`worker_id` text,
	`host_id` text,
	`trace_id` text,
	`spans` text DEFAULT '[]' NOT NULL,
	`captured` integer DEFAULT false NOT NULL
);
--> statement-breakpoint
CREATE INDEX `request_log_workload` ON `request_log` (`workload_id`,`at`);--> statement-breakpoint
CREATE INDEX `request_log_at` ON `request_log` (`at`);--> statement-breakpoint
CREATE TABLE `users` (
	`id` text PRIMARY KEY NOT NULL,
	`email` text NOT NULL,
	`name` text DEFAULT '' NOT NULL,
	`role` text NOT NULL,
	`password_hash` text,
	`oidc_issuer` text,
	`oidc_subject` text,
	`created_at` text NOT NULL,
	`updated_at` text NOT NULL,
	`last_sign_in_at` text
);
--> statement-breakpoint
CREATE UNIQUE INDEX `users_email` ON `users` (`email`);--> statement-breakpoint
CREATE UNIQUE INDEX `users_oidc` ON `users` (`oidc_issuer`,`oidc_subject`);--> statement-breakpoint
ALTER TABLE `audit_log` ADD `project_id` text;--> statement-breakpoint
CREATE INDEX `audit_project` ON `audit_log` (`project_id`,`at`);--> statement-breakpoint
ALTER TABLE `sessions` ADD `user_id` text REFERENCES users(id);--> statement-breakpoint
ALTER TABLE `sessions` ADD `method` text;--> statement-breakpoint
ALTER TABLE `sessions` ADD `user_agent` text;--> statement-breakpoint
ALTER TABLE `workloads` ADD `capture_until` text;