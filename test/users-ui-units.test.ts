import { describe, expect, test } from "bun:test";
import { can, whyNot } from "../ui/lib/me";
import { browserOf } from "../ui/components/sessions";
import type { Me } from "../ui/lib/types";

/** The dashboard's role rules (which change controls it offers) and the session list's browser names. */
const user = (role: Me["role"], projects: Me["projects"]): Me => ({
  kind: "user",
  role,
  user: null,
  projects,
  session_id: "ses_1",
});
const demo = [{ id: "prj_1", slug: "demo", name: "Demo" }];

describe("what the dashboard offers each role", () => {
  test("a viewer is offered no change and no logs; an operator changes their projects' things and models and reads their logs, not workers, projects, settings or users", () => {
    const viewer = user("viewer", demo);
    const operator = user("operator", demo);
    for (const action of [
      "workload.change",
      "key.change",
      "playground",
      "model.change",
      "worker.change",
      "project.create",
    ] as const)
      expect(can(action, "demo", viewer)).toBe(false);
    expect(can("workload.change", "demo", operator)).toBe(true);
    expect(can("key.change", "prj_1", operator)).toBe(true);
    expect(can("key.change", "other", operator)).toBe(false);
    expect(can("model.change", undefined, operator)).toBe(true);
    expect(can("settings.read", undefined, operator)).toBe(true);
    expect(can("settings.read", undefined, viewer)).toBe(false);
    for (const action of [
      "project.create",
      "project.change",
      "settings.change",
      "users",
      "signout.everywhere",
      "worker.change",
    ] as const)
      expect(can(action, undefined, operator)).toBe(false);
    expect(can("logs.read", "demo", operator)).toBe(true);
    expect(can("logs.read", "demo", viewer)).toBe(false);
  });

  test("the admin token and admin users may do everything; nobody signed in, nothing", () => {
    const token: Me = { kind: "admin_token", role: "admin", user: null, projects: "all", session_id: null };
    expect(can("users", undefined, token)).toBe(true);
    expect(can("key.change", "anything", user("admin", "all"))).toBe(true);
    expect(can("workload.change", "demo", undefined)).toBe(false);
  });

  test("why a control is missing names the role and who can", () => {
    expect(whyNot("workload.change", user("viewer", demo))).toBe(
      "Your role (viewer) can only look; an operator or admin of this project can change this.",
    );
    expect(whyNot("model.change", user("viewer", demo))).toBe(
      "Your role (viewer) can only look; an operator or admin can change this.",
    );
    expect(whyNot("settings.change", user("operator", demo))).toBe(
      "Your role (operator) cannot do this; only an admin can.",
    );
  });

  test("browsers in short words", () => {
    expect(
      browserOf(
        "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/120.0.0.0 Safari/537.36",
      ),
    ).toBe("Chrome on Linux");
    expect(
      browserOf(
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_0) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Safari/605.1.15",
      ),
    ).toBe("Safari on macOS");
    expect(browserOf("Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:121.0) Gecko/20100101 Firefox/121.0")).toBe(
      "Firefox on Windows",
    );
    expect(browserOf("curl/8.5.0")).toBe("curl");
    expect(browserOf(null)).toBe("unknown browser");
  });
});
