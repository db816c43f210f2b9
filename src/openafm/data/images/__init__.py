"""Images with known content, from installed packages (for the vision encoder and the vision-language model).

    text_images.py  words rendered from Debian fonts (DejaVu), the word known exactly: "read the word"
"""
