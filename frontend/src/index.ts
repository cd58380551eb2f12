// Entry point of the "Health" tab. TensorBoard loads this ES module into an iframe whose
// <base href> is the plugin's route prefix and calls render(): it injects the styles once
// and (re)starts the app.
import uplotCss from "uplot/dist/uPlot.min.css";
import { App } from "./app";
import appCss from "./style.css";

let app: App | null = null;

function injectStyle(): void {
  const id = "tb-trainhealth-style";
  if (document.getElementById(id)) return;
  const style = document.createElement("style");
  style.id = id;
  style.textContent = uplotCss + "\n" + appCss;
  document.head.appendChild(style);
}

export async function render(): Promise<void> {
  injectStyle();
  app?.stop();
  app = new App();
  app.mount();
}
