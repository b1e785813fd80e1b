// Identifiers in tables break between words, never inside one. The theme lets code break
// anywhere, and a browser breaks after any hyphen (--exchange, slurm-resolver, node[1-3]-ib):
// each word of a table's code goes in a span that does not wrap (stylesheets/extra.css).
document$.subscribe(() => {
  for (const code of document.querySelectorAll(".md-typeset td code, .md-typeset th code")) {
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT)
    const texts = []
    for (let text = walker.nextNode(); text; text = walker.nextNode()) texts.push(text)
    for (const text of texts) {
      text.replaceWith(...text.textContent.split(/(\s+)/).filter(part => part).map(part => {
        if (/^\s+$/.test(part)) return part
        const word = document.createElement("span")
        word.className = "whole-word"
        word.textContent = part
        return word
      }))
    }
  }
})
