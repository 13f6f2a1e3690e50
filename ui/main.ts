/** The dashboard's entry: styles, the router, and the app mounted on #app. */
import { render } from "preact";
import { html } from "htm/preact";
import { installRouter } from "./lib/router";
import { App } from "./app";

installRouter();
render(html`<${App} />`, document.getElementById("app")!);
