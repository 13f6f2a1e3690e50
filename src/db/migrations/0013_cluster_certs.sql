CREATE TABLE `cluster_certs` (
	`id` text PRIMARY KEY NOT NULL,
	`cert_pem` text NOT NULL,
	`key_pem` text NOT NULL,
	`created_at` text NOT NULL
);
