-- Every host of a cluster memoises keys, workloads, projects and workers on its request path; these
-- triggers tell all of them (NOTIFY inferd_changes, '<table>') when one of those changes. Usage
-- counters written every second (api_keys.requests, tokens) are left out on purpose.
CREATE OR REPLACE FUNCTION inferd_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('inferd_changes', TG_TABLE_NAME);
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE TRIGGER projects_changed AFTER INSERT OR UPDATE OR DELETE ON projects FOR EACH STATEMENT EXECUTE FUNCTION inferd_notify_change();
--> statement-breakpoint
CREATE TRIGGER api_keys_changed AFTER INSERT OR DELETE OR UPDATE OF project_id, name, type, scope, endpoints, hash, revoked_at, rpm, tpm, max_concurrent, tokens_per_day, tokens_per_month ON api_keys FOR EACH STATEMENT EXECUTE FUNCTION inferd_notify_change();
--> statement-breakpoint
CREATE TRIGGER workloads_changed AFTER INSERT OR UPDATE OR DELETE ON workloads FOR EACH STATEMENT EXECUTE FUNCTION inferd_notify_change();
--> statement-breakpoint
CREATE TRIGGER workers_changed AFTER INSERT OR DELETE OR UPDATE OF name, kind, credential_hash, join_token_hash, open_to ON workers FOR EACH STATEMENT EXECUTE FUNCTION inferd_notify_change();
--> statement-breakpoint
CREATE TRIGGER assignments_changed AFTER INSERT OR UPDATE OR DELETE ON assignments FOR EACH STATEMENT EXECUTE FUNCTION inferd_notify_change();
