CREATE TABLE `cloud_pods` (
	`worker_id` text PRIMARY KEY NOT NULL,
	`worker_name` text NOT NULL,
	`provider` text NOT NULL,
	`pod_id` text NOT NULL,
	`gpu_type` text NOT NULL,
	`gpus` integer NOT NULL,
	`cost_micros_per_hour` integer,
	`state` text NOT NULL,
	`reason` text,
	`attempts` integer DEFAULT 0 NOT NULL,
	`next_attempt_at` text,
	`created_at` text NOT NULL,
	`ended_at` text
);
