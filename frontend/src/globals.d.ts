// CSS files are bundled as text (esbuild loader "text") and injected as one <style>.
declare module "*.css" {
  const text: string;
  export default text;
}
