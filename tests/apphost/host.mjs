// The test host of tests/browser/test_app_host.py: the MCP Apps SDK's own host class (AppBridge)
// around one sandboxed frame, driven by the test through window.startHost. The frame's tools/call
// goes to window.mcpCall, which the test binds to our real server over stdio; what the app sends
// the host (messages, model context, sizes, display modes, links) is kept in window.hostSeen.
// `offers` replaces the host's capabilities, for a host that takes no messages.
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";

const OFFERS = { serverTools: {}, openLinks: {}, logging: {}, updateModelContext: { text: {} }, message: { text: {} } };

window.startHost = async ({ appUrl, toolInput, toolResult, hostContext, offers = OFFERS }) => {
  const seen = { messages: [], contexts: [], sizes: [], displayModes: [], calls: [], links: [], resultSent: null };
  window.hostSeen = seen;
  const frame = document.createElement("iframe");
  frame.sandbox = "allow-scripts allow-same-origin";
  frame.style.cssText = "width: 100%; height: 600px; border: 1px solid #888";
  frame.src = appUrl;
  document.body.append(frame);
  const bridge = new AppBridge(null, { name: "ask-user-rich-test-host", version: "1" }, offers, { hostContext });
  bridge.oncalltool = async (params) => {
    seen.calls.push(params.name);
    return JSON.parse(await window.mcpCall(JSON.stringify(params)));
  };
  bridge.onmessage = async (params) => { seen.messages.push(params); return {}; };
  bridge.onopenlink = async ({ url }) => { seen.links.push(url); return {}; };
  bridge.onupdatemodelcontext = async (params) => { seen.contexts.push(params); return {}; };
  bridge.onrequestdisplaymode = async ({ mode }) => { seen.displayModes.push(mode); return { mode }; };
  bridge.onsizechange = ({ height }) => {
    if (height) { frame.style.height = `${height}px`; seen.sizes.push(height); }
  };
  bridge.oninitialized = async () => {
    await bridge.sendToolInput({ arguments: toolInput });
    seen.resultSent = performance.now();
    await bridge.sendToolResult(toolResult);
  };
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
  window.hostBridge = bridge;
};

window.changeHostContext = (context) => window.hostBridge.setHostContext(context);
