export async function render() { document.body.textContent = "tb-trainhealth: bundle not built yet"; }
