/// The operator's page's one style sheet, served from `/console/style.css` (the pages' policy allows styles from the
/// relay itself only: no inline style).
extension ConsoleTemplates {
    static let css = """
        :root { font-family: system-ui, sans-serif; line-height: 1.45; color: #111; background: #fff; }
        body { margin: 0 auto; max-width: 72rem; padding: 0 1rem; }
        header { display: flex; gap: 1rem; align-items: center; flex-wrap: wrap; border-bottom: 1px solid #999; padding: .5rem 0; }
        header nav { display: flex; gap: .75rem; flex-wrap: wrap; }
        .brand { font-weight: bold; }
        a { color: #0645ad; }
        a[aria-current="page"] { font-weight: bold; text-decoration: underline; }
        a:focus, button:focus, input:focus, select:focus { outline: 3px solid #ff8c00; outline-offset: 2px; }
        table { border-collapse: collapse; width: 100%; margin: 1rem 0; }
        th, td { border: 1px solid #bbb; padding: .3rem .5rem; text-align: left; vertical-align: top; }
        caption { text-align: left; font-weight: bold; }
        .inline { display: inline; }
        .card { max-width: 28rem; display: grid; gap: .5rem; }
        .filters { display: flex; gap: .75rem; flex-wrap: wrap; align-items: end; }
        .error { border-left: 4px solid #b00020; padding-left: .5rem; }
        .notice { border-left: 4px solid #0645ad; padding-left: .5rem; }
        .status { font-weight: bold; }
        .status.dead::before, .status.failed::before, .bad::before { content: "✗ "; }
        .status.accepted::before, .ok::before { content: "✓ "; }
        .status.pending::before { content: "… "; }
        progress { width: 16rem; }
        main img, figure svg { max-width: 100%; height: auto; }
        figure { margin: 0; }
        footer { border-top: 1px solid #999; margin-top: 2rem; padding: .5rem 0; color: #444; }
        """
}
