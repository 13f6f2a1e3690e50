/** Ready-to-copy client snippets (curl, OpenAI SDK for Python and JavaScript) for one workload. */
import { html } from "htm/preact";
import { CodeBlock } from "./ui";
import { clientOrigin, ListenNote, useListen } from "./listen-note";

/** The OpenAI-compatible base URL of a workload on the server at `origin`. */
export const baseUrl = (origin: string, project: string, workload: string) => `${origin}/endpoint/${project}/${workload}/v1`;

/** The snippets for a workload; `secret` fills in the key, else an environment variable is used; `origin` is the server's client URL. */
export function snippets(w: { project_slug: string; slug: string; task_type: string }, secret?: string, origin = location.origin) {
  const base = baseUrl(origin, w.project_slug, w.slug);
  const embed = w.task_type === "embedding";
  const keyShell = secret ?? "$INFERD_API_KEY";
  const body = embed ? `{"input": "Hello from inferd"}` : `{"messages": [{"role": "user", "content": "Say hello"}]}`;
  const curl = `curl ${base}/${embed ? "embeddings" : "chat/completions"} \\\n  -H "Authorization: Bearer ${keyShell}" \\\n  -H "Content-Type: application/json" \\\n  -d '${body}'`;
  const pyKey = secret ? JSON.stringify(secret) : `os.environ["INFERD_API_KEY"]`;
  const jsKey = secret ? JSON.stringify(secret) : "process.env.INFERD_API_KEY";
  const python = embed
    ? `${secret ? "" : "import os\n"}from openai import OpenAI\n\nclient = OpenAI(base_url="${base}", api_key=${pyKey})\nresult = client.embeddings.create(model="default", input="Hello from inferd")\nprint(len(result.data[0].embedding))`
    : `${secret ? "" : "import os\n"}from openai import OpenAI\n\nclient = OpenAI(base_url="${base}", api_key=${pyKey})\nreply = client.chat.completions.create(\n    model="default",\n    messages=[{"role": "user", "content": "Say hello"}],\n)\nprint(reply.choices[0].message.content)`;
  const js = embed
    ? `import OpenAI from "openai";\n\nconst client = new OpenAI({ baseURL: "${base}", apiKey: ${jsKey} });\nconst result = await client.embeddings.create({ model: "default", input: "Hello from inferd" });\nconsole.log(result.data[0].embedding.length);`
    : `import OpenAI from "openai";\n\nconst client = new OpenAI({ baseURL: "${base}", apiKey: ${jsKey} });\nconst reply = await client.chat.completions.create({\n  model: "default",\n  messages: [{ role: "user", content: "Say hello" }],\n});\nconsole.log(reply.choices[0].message.content);`;
  return { curl, python, js };
}

/** The three snippets as copyable code blocks. */
export function Snippets({ workload, secret }: { workload: { project_slug: string; slug: string; task_type: string }; secret?: string }) {
  const listen = useListen();
  const s = snippets(workload, secret, clientOrigin(listen));
  return html`<div class="snippets">
    <${ListenNote} listen=${listen} lan="Other machines on your network reach inferd at" />
    ${secret ? null : html`<p class="muted">Set <code>INFERD_API_KEY</code> to a live key of this project (create one under Keys).</p>`}
    <${CodeBlock} label="curl" code=${s.curl} />
    <${CodeBlock} label="OpenAI SDK (Python)" code=${s.python} />
    <${CodeBlock} label="OpenAI SDK (JavaScript)" code=${s.js} />
  </div>`;
}
