/**
 * A model's answer as safe HTML. Markdown is rendered by marked with every raw HTML token escaped
 * (an answer's `<b>x</b>` shows those characters as text), so a model's HTML never reaches an HTML
 * parser; DOMPurify then stays as the second net (no scripts, handlers, images or styles).
 */
import { Marked } from "marked";
import DOMPurify from "dompurify";

/**
 * Tags an answer may not produce: scripts and handlers are gone anyway; images (a remote image
 * leaks the conversation in its URL), forms and frames are dropped too.
 */
const FORBID_TAGS = [
  "img",
  "picture",
  "source",
  "video",
  "audio",
  "iframe",
  "object",
  "embed",
  "form",
  "input",
  "button",
  "textarea",
  "select",
  "style",
  "link",
  "meta",
  "base",
  "svg",
  "math",
];

const ENTITIES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** `text` with the five HTML-significant characters as entities. */
function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ENTITIES[c]!);
}

/**
 * marked with raw HTML escaped as text (an HTML block becomes a paragraph of its lines), and images shown as a link with their
 * alt text (never loaded: a remote image would leak the conversation in its URL).
 */
const marked = new Marked({
  async: false,
  gfm: true,
  breaks: true,
  renderer: {
    html: ({ text, block }) =>
      block ? `<p>${escapeHtml(text.trimEnd()).replace(/\n/g, "<br>")}</p>\n` : escapeHtml(text),
    image: ({ href, text }) => `<a href="${escapeHtml(href)}">${escapeHtml(text || href)}</a>`,
  },
});

/**
 * The Markdown of `text` as HTML with raw HTML escaped (not yet sanitised; see markdownHtml).
 * @example markdownToHtml("**hi** <b>x</b>") // → "<p><strong>hi</strong> &lt;b&gt;x&lt;/b&gt;</p>\n"
 */
export function markdownToHtml(text: string): string {
  return marked.parse(text) as string;
}

let hooked = false;

/** Links in answers open in a new tab and pass no referrer. */
function hookLinks(): void {
  if (hooked) return;
  hooked = true;
  DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    if (node.tagName === "A") {
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer nofollow");
    }
  });
}

/**
 * The HTML of Markdown `text`, sanitised: raw HTML in the text shows as text, and DOMPurify removes
 * whatever else could run (`javascript:` links, handlers).
 * @example markdownHtml("**hi** <script>x()</script>") // → "<p><strong>hi</strong> &lt;script&gt;x()&lt;/script&gt;</p>\n"
 */
export function markdownHtml(text: string): string {
  hookLinks();
  return DOMPurify.sanitize(markdownToHtml(text), { FORBID_TAGS, FORBID_ATTR: ["style"], ALLOW_DATA_ATTR: false });
}
